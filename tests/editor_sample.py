"""The file both real-editor tests type into: a pattern the model continues reliably."""

import shutil
from pathlib import Path

SOURCE = (
    "import math\n\n\n"
    "def area_of_circle(radius: float) -> float:\n"
    "    return math.pi * radius ** 2\n\n\n"
    "def area_of_square(side: float) -> float:\n"
    "    return side ** 2\n\n\n"
    "def area_of_rectangle(width: float, height: float) -> float:\n"
)

# The README's first picture: the user has typed `    return sum` and the model's line is right
# and whole. test_model_premises.py checks that it is certain on the weights the server runs and
# on the very prompt it builds (a wide margin at every token, the line's end too, however the
# healer spells the typed `sum`), so the picture tests may assert it on any CPU. The prompt names
# the file by its path, so the tests write it at this one path.
PICTURE = "def mean(values: list[float]) -> float:\n"
PICTURE_TYPED = "    return sum"
PICTURE_SUGGESTION = "(values) / len(values)"
PICTURE_PATH = Path("/tmp/specfill-picture/project/stats.py")


def picture_file() -> Path:
    """PICTURE at PICTURE_PATH, in a folder of its own (no other file to add context)."""
    shutil.rmtree(PICTURE_PATH.parent, ignore_errors=True)
    PICTURE_PATH.parent.mkdir(parents=True)
    PICTURE_PATH.write_text(PICTURE)
    return PICTURE_PATH
