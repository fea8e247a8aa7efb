"""What Kubernetes' event recorder lets through: aggregation, deduplication, spam filter.

A pure model of client-go's `tools/record/events_cache.go` (the legacy recorder the Job
controller, the scheduler and the kubelet use), on an injected clock (`now` is an argument):

1. Aggregation: events that differ only in message (same source, involved object, type and
   reason) are counted per 10-minute sliding window; from the `max_events`-th distinct message
   on (client-go checks `len(localKeys) < maxEvents`, maxEvents 10) they become ONE combined
   event, "(combined from similar events): <message>", updated in place.
2. Deduplication: an event identical to one already recorded (the combined event included)
   updates the stored Event (count + 1, lastTimestamp) instead of creating a new one.
3. Spam filter: a token bucket per source + involved object (kind, namespace, name, uid,
   apiVersion; the reason is NOT part of the key): burst 25, one token per 300 s. An event
   (new or update) that finds the bucket empty is dropped. All of a Job's events, the
   `SuccessfulCreate` of every pod it creates and its `Completed` included, share one bucket.

Used by the local cluster (and usable by any simulator) so that the controller meets the
same lossy event stream it meets on GKE.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

COMBINED_PREFIX = "(combined from similar events): "


@dataclass(frozen=True)
class RecorderSettings:
    """client-go's defaults; tests may shrink them (never the local stack's default)."""

    burst: int = 25
    refill_s: float = 300.0
    max_events: int = 10
    aggregate_window_s: float = 600.0
    cache_size: int = 4096  # client-go's LRU size


@dataclass
class TokenBucket:
    """A token bucket that starts full: `burst` tokens, one more every `refill_s` seconds."""

    burst: int
    refill_s: float
    tokens: float
    last: datetime

    @classmethod
    def full(cls, burst: int, refill_s: float, now: datetime) -> TokenBucket:
        return cls(burst, refill_s, float(burst), now)

    def take(self, now: datetime) -> bool:
        """Spend one token if there is one (after refilling for the time elapsed)."""
        elapsed = max((now - self.last).total_seconds(), 0.0)
        self.tokens = min(float(self.burst), self.tokens + elapsed / self.refill_s)
        self.last = max(self.last, now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass(frozen=True)
class Recorded:
    """The recorder's verdict on one event: `create` a new Event, `update` a stored one (same
    name; count and lastTimestamp bumped), or `drop` it (the spam filter's bucket is empty).
    `event` is the core/v1 Event as stored (None when dropped)."""

    action: str
    event: dict[str, Any] | None


def _object_key(event: dict[str, Any]) -> tuple[str, ...]:
    obj = event.get("involvedObject") or {}
    return tuple(str(obj.get(k, "")) for k in ("kind", "namespace", "name", "uid", "apiVersion"))


def spam_key(event: dict[str, Any]) -> tuple[str, ...]:
    """The spam filter's key: source component and host, and the involved object."""
    source = event.get("source") or {}
    return (str(source.get("component", "")), str(source.get("host", "")), *_object_key(event))


def aggregate_key(event: dict[str, Any]) -> tuple[str, ...]:
    """Events with the same aggregate key differ at most in their message."""
    return (*spam_key(event), str(event.get("type", "")), str(event.get("reason", "")))


@dataclass
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    last: datetime | None = None


@dataclass
class _Stored:
    event: dict[str, Any]


class EventRecorderModel:
    """Feed it the Events a component emits, in order; it says which reach the API server."""

    def __init__(self, settings: RecorderSettings | None = None) -> None:
        self.settings = settings or RecorderSettings()
        self._aggregates: OrderedDict[tuple[str, ...], _Aggregate] = OrderedDict()
        self._stored: OrderedDict[tuple[str, ...], _Stored] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], TokenBucket] = OrderedDict()

    def record(self, event: dict[str, Any], now: datetime) -> Recorded:
        """Pass one emitted Event (a core/v1 Event dict: involvedObject, source, type,
        reason, message, metadata.name) through aggregation, dedupe and the spam filter."""
        candidate, cache_key = self._aggregate(event, now)
        stored, action = self._observe(candidate, cache_key, now)
        # client-go records the observation before the spam filter runs: a dropped repeat
        # still bumps the count the next update will carry.
        self._remember(self._stored, cache_key, _Stored(stored))
        if not self._bucket(spam_key(event), now).take(now):
            return Recorded("drop", None)
        return Recorded(action, dict(stored))

    def _aggregate(
        self, event: dict[str, Any], now: datetime
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        s = self.settings
        key = aggregate_key(event)
        message = str(event.get("message", ""))
        record = self._aggregates.get(key) or _Aggregate()
        if record.last is not None and (now - record.last).total_seconds() > s.aggregate_window_s:
            record = _Aggregate()
        record.messages.add(message)
        record.last = now
        self._remember(self._aggregates, key, record)
        if len(record.messages) < s.max_events:
            return event, (*key, message)
        record.messages.discard(message)  # client-go pops one: the set stays at its maximum
        obj = event.get("involvedObject") or {}
        combined = {
            **event,
            "metadata": {
                **(event.get("metadata") or {}),
                "name": f"{obj.get('name', '')}.{int(now.timestamp() * 1e9):x}",
            },
            "message": COMBINED_PREFIX + message,
        }
        return combined, key

    def _observe(
        self, event: dict[str, Any], cache_key: tuple[str, ...], now: datetime
    ) -> tuple[dict[str, Any], str]:
        stamp = _iso(now)
        previous = self._stored.get(cache_key)
        if previous is None:
            fresh = {**event, "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp}
            return fresh, "create"
        old = previous.event
        updated = {
            **old,
            "message": event.get("message", old.get("message")),
            "count": int(old.get("count", 1)) + 1,
            "lastTimestamp": stamp,
        }
        return updated, "update"

    def _bucket(self, key: tuple[str, ...], now: datetime) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket.full(self.settings.burst, self.settings.refill_s, now)
        self._remember(self._buckets, key, bucket)
        return bucket

    def _remember(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        """An LRU bounded by `cache_size`, as client-go's caches are."""
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self.settings.cache_size:
            cache.popitem(last=False)


def _iso(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")
