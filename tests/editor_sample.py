"""The file both real-editor tests type into: a pattern the model continues reliably."""

SOURCE = (
    "import math\n\n\n"
    "def area_of_circle(radius: float) -> float:\n"
    "    return math.pi * radius ** 2\n\n\n"
    "def area_of_square(side: float) -> float:\n"
    "    return side ** 2\n\n\n"
    "def area_of_rectangle(width: float, height: float) -> float:\n"
)
