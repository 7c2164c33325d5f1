"""The one selection all panels share: a layer, a head, a query token and a key token."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Selection:
    layer: int = 0
    head: int = 0
    query: int | None = None   # token position; None means the last token
    key: int | None = None     # token position; None means the query's own position

    def query_index(self, n_tokens: int) -> int:
        """The query position resolved against a sentence of n_tokens (clamped)."""
        if n_tokens <= 0:
            return 0
        return n_tokens - 1 if self.query is None else max(0, min(self.query, n_tokens - 1))

    def key_index(self, n_tokens: int) -> int:
        q = self.query_index(n_tokens)
        return q if self.key is None else max(0, min(self.key, q))

    def updated(self, **changes) -> "Selection":
        return replace(self, **changes)

    def clamped(self, num_layers: int, num_heads: int, n_tokens: int) -> "Selection":
        """Keep the selection inside a (possibly smaller) new model or sentence."""
        query = None if self.query is None or self.query >= n_tokens else self.query
        last_query = n_tokens - 1 if query is None else query  # None means the last token
        key = None if self.key is None or self.key > last_query else self.key
        return Selection(min(self.layer, num_layers - 1), min(self.head, num_heads - 1), query, key)

    def for_tokens(self, old_ids, new_ids) -> "Selection":
        """The selection once the sentence's tokens go from old_ids to new_ids (sequences of ints; None: no
        sentence before). A clicked query (and its key) stays while the tokens up to it are unchanged: the
        user extends or edits the sentence after it. Otherwise it goes back to the last token: the token it
        named is gone. Layer and head stay."""
        if self.query is None:
            return self
        through = self.query + 1
        if old_ids is not None and len(old_ids) >= through and len(new_ids) >= through \
                and list(old_ids[:through]) == list(new_ids[:through]):
            return self
        return replace(self, query=None, key=None)
