"""The event table: one row per event, columns as numpy arrays, strings as symbol ids."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from scalescope.events.memory import release_memory
from scalescope.events.schema import INT_COLUMNS, NO_PEER, STRING_COLUMNS, Kind, upgraded


@dataclass
class SymbolTable:
    """Interned strings; id 0 is always the empty string (no value)."""

    strings: list[str] = field(default_factory=lambda: [""])
    _ids: dict[str, int] = field(default_factory=lambda: {"": 0}, repr=False)

    def intern(self, value: str) -> int:
        sid = self._ids.get(value)
        if sid is None:
            sid = len(self.strings)
            self.strings.append(value)
            self._ids[value] = sid
        return sid

    def id_of(self, value: str) -> int:
        """The id of ``value``, or -1 when no row holds it."""
        return self._ids.get(value, -1)

    def __getitem__(self, sid: int) -> str:
        return self.strings[sid]


@dataclass
class EventTable:
    """Columnar events of one or more ranks; see docs/schema.md for units."""

    rank: np.ndarray
    step: np.ndarray
    kind: np.ndarray
    name: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    nbytes: np.ndarray
    count: np.ndarray
    dtype: np.ndarray
    group: np.ndarray
    seq: np.ndarray
    tag: np.ndarray
    peer: np.ndarray = field(default_factory=lambda: None)  # type: ignore[assignment]
    """Global rank of a send's or recv's partner; -1 on other rows and where not given (a
    factory, not a class default: a selection's columns are found through ``__getattr__``)."""
    symbols: SymbolTable = field(default_factory=SymbolTable)
    _kinds: dict[int, EventTable] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """``of_kind``'s tables, made once: the analysis asks for each kind many times, and a
    1,024-rank run has tens of millions of rows (the columns are never changed in place)."""

    COLUMNS = (*INT_COLUMNS, *STRING_COLUMNS)

    def __post_init__(self) -> None:
        if self.peer is None:
            self.peer = np.full(len(self.rank), NO_PEER, dtype=np.int32)

    @classmethod
    def empty(cls, symbols: SymbolTable | None = None) -> EventTable:
        cols = {c: np.zeros(0, dtype=t) for c, t in INT_COLUMNS.items()}
        cols |= {c: np.zeros(0, dtype=np.int32) for c in STRING_COLUMNS}
        return cls(**cols, symbols=symbols or SymbolTable())

    @classmethod
    def from_arrow(cls, table: pa.Table, symbols: SymbolTable) -> EventTable:
        """Convert an Arrow table with string columns, interning strings into ``symbols``.
        The integer columns are copied into numpy's memory (the Arrow pool would keep what
        it freed until asked); each string column is combined, then encoded once."""
        table = upgraded(table)
        cols = {c: table.column(c).to_numpy().astype(t, copy=False) for c, t in INT_COLUMNS.items()}
        for c in STRING_COLUMNS:
            encoded = table.column(c).combine_chunks().dictionary_encode()
            local = [symbols.intern(s or "") for s in encoded.dictionary.to_pylist()]
            lookup = np.asarray([*local, 0], dtype=np.int32)  # a null is the empty string
            indices = encoded.indices.fill_null(len(local)).to_numpy(zero_copy_only=False)
            cols[c] = lookup[indices.astype(np.int64)] if len(indices) else np.zeros(0, np.int32)
        return cls(**cols, symbols=symbols)

    @classmethod
    def concat(cls, tables: Sequence[EventTable]) -> EventTable:
        """Concatenate tables that share one symbol table."""
        if not tables:
            return cls.empty()
        symbols = _shared_symbols(tables)
        cols = {c: np.concatenate([getattr(t, c) for t in tables]) for c in cls.COLUMNS}
        return cls(**cols, symbols=symbols)

    def __len__(self) -> int:
        source = self.__dict__.get("_source")
        return (
            len(source[1]) if source is not None and "rank" not in self.__dict__ else len(self.rank)
        )

    def select(self, rows: np.ndarray | slice) -> EventTable:
        """The rows ``rows`` (a mask, indices or a slice) of this table. A slice is a view; else
        each column is gathered when first read: the analysis selects tables of millions of
        rows and reads two or three of their thirteen columns."""
        if isinstance(rows, slice):
            cols = {c: getattr(self, c)[rows] for c in self.COLUMNS}
            return EventTable(**cols, symbols=self.symbols)
        if rows.dtype == bool and len(rows) == len(self) and rows.all():
            return self  # every row (``seq >= 0`` of collectives, ...): no gather of a copy
        index = np.flatnonzero(rows) if rows.dtype == bool else rows
        source = self.__dict__.get("_source")
        if source is not None:  # a selection of a selection: one gather from the first table
            parent, first = source
            return parent.select(first[index])
        table = EventTable.__new__(EventTable)
        table.symbols, table._kinds, table._source = self.symbols, {}, (self, index)
        return table

    def __getattr__(self, name: str) -> np.ndarray:
        """A column of a selection, gathered from its table on first read."""
        source = self.__dict__.get("_source")
        if source is None or name not in _COLUMN_SET:
            raise AttributeError(name)
        parent, index = source
        column = getattr(parent, name)[index]
        setattr(self, name, column)
        return column

    def of_kind(self, kind: Kind) -> EventTable:
        found = self._kinds.get(int(kind))
        if found is None:
            found = self._kinds[int(kind)] = self.select(self.kind == int(kind))
        return found

    @classmethod
    def concat_by_kind(cls, tables: list[EventTable]) -> EventTable:
        """``concat`` with the rows grouped by kind (each table's order kept within a kind), so
        ``of_kind`` is a slice of the table rather than a copy. Each table's rows are gathered
        straight to their place (no sorted copy of a table, no concatenated copy of all), and
        each column of ``tables`` is dropped once gathered: a 1,024-rank run holds its rows
        once, not twice."""
        if not tables:
            return cls.empty()
        symbols = _shared_symbols(tables)
        n_kinds = max([len(Kind), *(int(t.kind.max()) + 1 for t in tables if len(t))])
        counts = np.array([np.bincount(t.kind, minlength=n_kinds) for t in tables])
        orders = [np.argsort(t.kind, kind="stable") for t in tables]
        kind_start = np.r_[0, np.cumsum(counts.sum(axis=0))]
        # where table i's rows of kind k go: after kind k's earlier kinds and earlier tables
        dest = kind_start[:-1] + np.r_[np.zeros((1, n_kinds), int), np.cumsum(counts, 0)[:-1]]
        src = np.c_[np.zeros(len(tables), int), np.cumsum(counts, axis=1)]
        cols = {}
        for c in cls.COLUMNS:
            out = np.empty(int(kind_start[-1]), dtype=getattr(tables[0], c).dtype)
            for i, (t, order) in enumerate(zip(tables, orders, strict=True)):
                for k in np.flatnonzero(counts[i]):
                    at = dest[i, k]
                    np.take(
                        getattr(t, c),
                        order[src[i, k] : src[i, k + 1]],
                        out=out[at : at + counts[i, k]],
                        mode="clip",  # the indices are valid; "raise" buffers the output
                    )
                setattr(t, c, None)
            cols[c] = out
            release_memory()  # the freed column, before the next one is made
        table = cls(**cols, symbols=symbols)
        for k in np.flatnonzero(np.diff(kind_start)):
            table._kinds[int(k)] = table.select(slice(int(kind_start[k]), int(kind_start[k + 1])))
        return table

    def where(self, column: str, value: str) -> np.ndarray:
        """Boolean mask of rows whose string ``column`` equals ``value``."""
        return getattr(self, column) == self.symbols.id_of(value)

    def strings(self, column: str) -> list[str]:
        """Decoded values of a string column, row by row."""
        return [self.symbols[i] for i in getattr(self, column)]

    def ranks(self) -> list[int]:
        """The ranks that have rows, ascending (a count per rank number: no sort)."""
        if len(self) == 0 or self.rank.min() < 0:
            return sorted(int(r) for r in np.unique(self.rank))
        return np.flatnonzero(np.bincount(self.rank)).tolist()

    def names(self, ids: Iterable[int]) -> list[str]:
        return [self.symbols[int(i)] for i in ids]


_COLUMN_SET = frozenset(EventTable.COLUMNS)


def _shared_symbols(tables: Sequence[EventTable]) -> SymbolTable:
    symbols = tables[0].symbols
    if any(t.symbols is not symbols for t in tables):
        raise ValueError("tables to concatenate must share one SymbolTable")
    return symbols
