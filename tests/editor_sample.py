"""The file both real-editor tests type into: a pattern the model continues reliably."""

SOURCE = (
    "import math\n\n\n"
    "def area_of_circle(radius: float) -> float:\n"
    "    return math.pi * radius ** 2\n\n\n"
    "def area_of_square(side: float) -> float:\n"
    "    return side ** 2\n\n\n"
    "def area_of_rectangle(width: float, height: float) -> float:\n"
)

# The README's first picture: the user has typed `    return 2` and the model's line is right.
# test_model_premises.py checks that it is certain (a wide margin at every token, however the
# healer spells the typed `2`), so the picture test may assert it on any CPU.
PICTURE = (
    "import math\n\n\n"
    "def area_of_circle(radius: float) -> float:\n"
    "    return math.pi * radius ** 2\n\n\n"
    "def circumference_of_circle(radius: float) -> float:\n"
)
PICTURE_TYPED = "    return 2"
PICTURE_SUGGESTION = " * math.pi * radius"
