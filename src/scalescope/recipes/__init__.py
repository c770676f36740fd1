"""Large-batch training rules as a small API (docs/recipes.md).

from scalescope.recipes import get_recipe
training = get_recipe("goyal").build(model, global_batch=8192, steps_per_epoch=156,
                                     total_steps=14040)
# each step: loss = training.criterion(model(x), y); loss.backward();
#            training.optimizer.step(); training.scheduler.step()
"""

from scalescope.recipes.optimizers import LAMB, LARS
from scalescope.recipes.recipe import (
    GOYAL,
    LARS_RECIPE,
    RECIPES,
    Recipe,
    Training,
    adaptive_param_groups,
    get_recipe,
    scale_lr,
    warmup_schedule,
)

__all__ = [
    "GOYAL",
    "LAMB",
    "LARS",
    "LARS_RECIPE",
    "RECIPES",
    "Recipe",
    "Training",
    "adaptive_param_groups",
    "get_recipe",
    "scale_lr",
    "warmup_schedule",
]
