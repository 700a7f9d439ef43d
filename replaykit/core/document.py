"""What every stored document's model is built on (``records.py``, ``verdicts.py``, ...).

A stored document is canonical JSON; its model is the one declaration of its shape, read with
``model_validate`` (what a store or a bundle holds) and written with ``to_json`` (the dict the
store writes canonically). A document reads back to its own bytes:

- it dumps the fields it holds: read, the keys it was stored with (a field a later version
  added is absent from a document written before, and stays absent); built in code, every
  field but those marked ``WhenSet`` left at their default (so a document written before such
  a field existed is written the same today);
- keys no field declares are kept as they were (a newer writer's, read by an older reader);
- a number keeps its type (``Real``: a stored ``1`` stays ``1``, never ``1.0``);
- ``version`` is the document's format, ``1`` (every document stored so far) unless a
  model says otherwise; it is written only when it is not ``1``, so the documents of
  format 1 keep their bytes and their ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PlainSerializer,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)

#: the validation context of a stored document being read (``Stored.read``, a config a stored
#: document holds: ``RunConfig.recorded``, an episode's recorded ``env`` section)
STORED = {"stored": True}


def is_stored(context: object) -> bool:
    """Whether a validation ``context`` is a stored read's (``STORED``): what was stored in an
    older format still reads there, and only there."""
    return isinstance(context, dict) and bool(context.get("stored"))


class _WhenSet:
    """Field metadata: stored only when it differs from its default."""

    def __repr__(self) -> str:
        return "WhenSet"


#: ``Annotated[int, WhenSet] = 0``: a field a document holds only when it is not its default
WhenSet = _WhenSet()


def _keep_int(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # as stored: 1 stays 1 (canonical JSON "1", never "1.0")
    return handler(value)


if TYPE_CHECKING:  # ``core.records.JSON``'s shape (records.py stays free of pydantic and typing_extensions)
    StoredJSON: TypeAlias = (
        str | int | float | bool | Sequence["StoredJSON"] | Mapping[str, "StoredJSON"] | None
    )
else:  # a named alias: pydantic validates a recursive type only as one (a number keeps its type)
    from typing_extensions import TypeAliasType

    StoredJSON = TypeAliasType(
        "StoredJSON", "str | int | float | bool | Sequence[StoredJSON] | Mapping[str, StoredJSON] | None"
    )

#: a number as stored: a float, or an int kept an int
Real = Annotated[float, WrapValidator(_keep_int), PlainSerializer(lambda v: v)]


class Stored(BaseModel):
    """A stored shape (a document or a part of one): see the module docstring."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    _when_set: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._when_set = frozenset(
            name for name, info in cls.model_fields.items() if any(m is WhenSet for m in info.metadata)
        )

    @model_validator(mode="wrap")
    @classmethod
    def _held(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        """Read (``read``: context ``stored``), it holds the keys it was stored with; built in
        code, every field but the ``WhenSet`` ones at their default."""
        made = handler(data)
        if made is data or not isinstance(made, cls):  # an instance passed as is (read: as it was read)
            return made
        if isinstance(info.context, dict) and info.context.get("stored"):
            made._read()
            return made
        fields = cls.model_fields
        at_default = {
            n for n in cls._when_set if getattr(made, n) == fields[n].get_default(call_default_factory=True)
        }
        made.__pydantic_fields_set__ = (made.__pydantic_fields_set__ | set(fields)) - at_default
        made._built()
        return made

    def _built(self) -> None:
        """Built in code: derive what the document derives (a subclass's hook)."""

    def _read(self) -> None:
        """Read from a store or a bundle: check what the document derives (a subclass's hook;
        raise ``ValueError`` on a mismatch)."""

    def _set(self, name: str, value: object, held: bool = True) -> None:
        """Set a field a hook derives (frozen models too), held in the dump or not."""
        object.__setattr__(self, name, value)
        if held:
            self.__pydantic_fields_set__.add(name)
        else:
            self.__pydantic_fields_set__.discard(name)

    def to_json(self) -> dict[str, Any]:
        """The document as the store writes it (canonically): the fields it holds, its other keys."""
        return self.model_dump(mode="json", exclude_unset=True)

    def replaced(self, **changes: Any) -> Self:
        """This one with ``changes``, built as code builds it: every field held, what it derives
        derived again (``model_copy`` derives nothing)."""
        return type(self).model_validate({**dict(self), **changes})

    @classmethod
    def read(cls, data: object) -> Self:
        """A stored document (a dict as decoded) as this model; ``ValueError`` when it is another shape."""
        return cls.model_validate(data, context=STORED)


class Document(Stored):
    """A whole stored document: a ``Stored`` shape with its format ``version``."""

    version: Annotated[int, WhenSet] = Field(
        default=1,
        ge=1,
        description="The document's format (1 when absent: every document written before formats were numbered).",
    )


__all__ = ["Document", "Real", "Stored", "StoredJSON", "WhenSet"]
