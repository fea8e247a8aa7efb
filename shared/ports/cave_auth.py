"""The port to CAVE's auth service (sticky_auth): register a graph's table with a dataset
(adapters.cave.sticky_auth). Pure: the port and its error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CaveRegistration:
    """What to register: the graph's table `table` under `service`, in CAVE `dataset`, at
    `host` (its sticky_auth base)."""

    host: str
    dataset: str
    service: str
    table: str

    @property
    def url(self) -> str:
        """The mapping's URL (POST registers it)."""
        return (
            f"{self.host.rstrip('/')}/sticky_auth/api/v1/service/{self.service}"
            f"/table/{self.table}/dataset/{self.dataset}"
        )

    @property
    def lookup_url(self) -> str:
        """Where the dataset the table is mapped to is read (GET)."""
        return self.url.rsplit("/", 1)[0]

    def by_hand(self) -> str:
        """The command an operator runs to register by hand (the token left to them)."""
        return f'curl -X POST -H "Authorization: Bearer $CAVE_TOKEN" {self.url}'


@dataclass(frozen=True)
class Answer:
    """What sticky_auth answered the POST: its status and text, and for a 422 the dataset
    the table is already mapped to ("" if it could not be read)."""

    status: int
    text: str = ""
    mapped_to: str = ""


class CaveUnreachableError(ConnectionError):
    """sticky_auth did not answer (DNS, refused, TLS, timeout): the message says which."""


class CaveAuth(Protocol):
    """Registers graphs with CAVE."""

    def register(self, reg: CaveRegistration, token: str) -> Answer:
        """POST the mapping with `token` as Bearer; for a 422, read which dataset the table
        is mapped to. CaveUnreachableError when nothing answers."""
        ...
