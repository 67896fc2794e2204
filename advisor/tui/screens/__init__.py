"""One module a screen: the six steps of the walk, and Diagnose."""

from .ceiling import CeilingScreen
from .diagnose import DiagnoseScreen
from .recipe import RecipeScreen
from .setup import SetupScreen
from .start import StartScreen
from .sweep import SweepScreen
from .trial import TrialScreen

SCREENS_BY_NAME = {
    "setup": SetupScreen,
    "ceiling": CeilingScreen,
    "start": StartScreen,
    "trial": TrialScreen,
    "sweep": SweepScreen,
    "recipe": RecipeScreen,
    "diagnose": DiagnoseScreen,
}
