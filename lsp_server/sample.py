import math


def area_of_circle(radius: float) -> float:
    return math.pi * radius ** 2


def area_of_square(side: float) -> float:
    return side ** 2


def area_of_rectangle(width: float, height: float) -> float:
