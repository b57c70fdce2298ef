"""The space stage: a YAML search space loaded, validated against its JSON schema (errors name the file and
the key), and its expressions (restrictions, launch geometry, metrics) checked once."""

from tuner.space.loader import SpaceError, load_space
from tuner.space.model import METRIC_INPUTS, Space, format_size, size_distance

__all__ = ["METRIC_INPUTS", "Space", "SpaceError", "format_size", "load_space", "size_distance"]
