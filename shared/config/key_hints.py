"""Near names for config keys: what an operator probably meant by a key the models do not
have (`job.batchsize` -> `batch_size`). Pure module (difflib on the models' field names).
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

# Keys load_config fills in itself: never a file's key, so never a suggestion.
NOT_FILE_KEYS = frozenset(
    {"dataset_config", "source_path", "compat_notes", "load_notes", "dataset_fingerprint"}
)


def near_key(name: str, known: Iterable[str]) -> str | None:
    """The known key closest to `name` (case aside), or None when none is close."""
    by_lower = {k.lower(): k for k in known if k != name}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.7)
    return by_lower[close[0]] if close else None


def did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    """` (did you mean PREFIX.KEY?)` for the near known key, else ` (typo?)`."""
    near = near_key(name, known)
    return f" (did you mean {prefix}{near}?)" if near else " (typo?)"


def keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys the mapping at `loc` (a validation error's location, without its last key)
    accepts, walking `model`'s fields and the values of its dicts; [] where it cannot tell."""
    node: Any = model
    for part in loc:
        node = _step(node, part)
        if node is None:
            return []
    target = _model_in(node)
    if target is None:
        return []
    return [k for k in target.model_fields if k not in NOT_FILE_KEYS]


def _step(annotation: Any, part: str | int) -> Any:
    """The annotation one key below `annotation` (a model's field, a dict's value)."""
    model = _model_in(annotation)
    if model is not None:
        field = model.model_fields.get(str(part))
        return None if field is None else field.annotation
    for arg in _union_args(annotation):
        if get_origin(arg) is dict:
            return get_args(arg)[1]
    return None


def _union_args(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(a for a in get_args(annotation) if a is not type(None))
    return (annotation,)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model `annotation` is (or is optionally), if it is one."""
    for arg in _union_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None
