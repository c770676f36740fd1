"""The event table: one row per event, columns as numpy arrays, strings as symbol ids."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from scalescope.events.schema import INT_COLUMNS, STRING_COLUMNS, Kind


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
    symbols: SymbolTable = field(default_factory=SymbolTable)
    _kinds: dict[int, EventTable] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """``of_kind``'s tables, made once: the analysis asks for each kind many times, and a
    1,024-rank run has tens of millions of rows (the columns are never changed in place)."""

    COLUMNS = (*INT_COLUMNS, *STRING_COLUMNS)

    @classmethod
    def empty(cls, symbols: SymbolTable | None = None) -> EventTable:
        cols = {c: np.zeros(0, dtype=t) for c, t in INT_COLUMNS.items()}
        cols |= {c: np.zeros(0, dtype=np.int32) for c in STRING_COLUMNS}
        return cls(**cols, symbols=symbols or SymbolTable())

    @classmethod
    def from_arrow(cls, table: pa.Table, symbols: SymbolTable) -> EventTable:
        """Convert an Arrow table with string columns, interning strings into ``symbols``."""
        cols = {
            c: table.column(c).to_numpy(zero_copy_only=False).astype(t, copy=False)
            for c, t in INT_COLUMNS.items()
        }
        for c in STRING_COLUMNS:
            encoded = table.column(c).combine_chunks().dictionary_encode()
            local = [symbols.intern(s or "") for s in encoded.dictionary.to_pylist()]
            lookup = np.asarray(local or [0], dtype=np.int32)
            indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
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
        return len(self.rank)

    def select(self, mask: np.ndarray) -> EventTable:
        cols = {c: getattr(self, c)[mask] for c in self.COLUMNS}
        return EventTable(**cols, symbols=self.symbols)

    def of_kind(self, kind: Kind) -> EventTable:
        found = self._kinds.get(int(kind))
        if found is None:
            found = self._kinds[int(kind)] = self.select(self.kind == int(kind))
        return found

    @classmethod
    def concat_by_kind(cls, tables: list[EventTable]) -> EventTable:
        """``concat`` with the rows grouped by kind (each rank's order kept within a kind), so
        ``of_kind`` is a slice of the table rather than a copy. Empties ``tables`` column by
        column as it goes: a 1,024-rank run holds its rows once, not twice."""
        if not tables:
            return cls.empty()
        symbols = _shared_symbols(tables)
        kinds = np.concatenate([t.kind for t in tables])
        order = np.argsort(kinds, kind="stable")
        cols = {}
        for c in cls.COLUMNS:
            cols[c] = np.concatenate([getattr(t, c) for t in tables])[order]
            for t in tables:
                setattr(t, c, None)
        table = cls(**cols, symbols=symbols)
        sorted_kinds = table.kind
        for k in np.unique(sorted_kinds).tolist():
            lo, hi = np.searchsorted(sorted_kinds, [k, k + 1])
            table._kinds[k] = table.select(slice(int(lo), int(hi)))
        return table

    def where(self, column: str, value: str) -> np.ndarray:
        """Boolean mask of rows whose string ``column`` equals ``value``."""
        return getattr(self, column) == self.symbols.id_of(value)

    def strings(self, column: str) -> list[str]:
        """Decoded values of a string column, row by row."""
        return [self.symbols[i] for i in getattr(self, column)]

    def ranks(self) -> list[int]:
        return sorted(int(r) for r in np.unique(self.rank))

    def names(self, ids: Iterable[int]) -> list[str]:
        return [self.symbols[int(i)] for i in ids]


def _shared_symbols(tables: Sequence[EventTable]) -> SymbolTable:
    symbols = tables[0].symbols
    if any(t.symbols is not symbols for t in tables):
        raise ValueError("tables to concatenate must share one SymbolTable")
    return symbols
