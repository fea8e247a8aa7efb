"""Grow a pod request to fill the node its size already forces (`job.resources.pack`). Pure.

Autopilot bills the pod's request, but a pod-billed class still places it on a node of one of
a few vCPU rungs, and Compute Engine quota (and the scheduler's room for more pods) is charged
on the whole node: a 16-vCPU pod cannot fit a 16-vCPU node (allocatable is lower), so it gets
a 32-vCPU one and half of it idles. Packing grows the request into the rung it already forces,
so the idle cores do work (PCG_N_PROCESSES follows the billed vCPU) instead of holding quota.

The algorithm is the predecessor's (cave-pipeline main, `packing.fill_node`), so a file written
for it asks for the same pods here; the only difference is the cap, which here is the compute
class's own ceiling (shared.jobs.autopilot.CLASS_LIMITS), where the predecessor capped only the
default class. See docs/configuration.md#packing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# vCPU rungs pod-billed classes provision nodes on (E2: 2-32, T2D: 1-60).
NODE_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 48, 60)
# vCPU held back for DaemonSets on every node. Over-stated on purpose (the predecessor measured
# 0.553): it only shrinks the grown request, never picks the rung, so erring high costs
# headroom and can never push a pod onto a larger node.
DAEMONSET_CPU = 1.0
# GiB per vCPU of the standard machine shapes (4 GB nominal, 3.63 measured). Above it the
# machine is chosen by memory (possibly a highmem shape with another vCPU ladder), which the
# rung arithmetic does not describe: such requests are left alone.
STANDARD_GIB_PER_CPU = 3.5
CPU_STEP = 0.25  # Autopilot's CPU grid: the grown request is floored to it

# GKE's node-allocatable CPU reservation: (cores, share reserved) in order, then the rest.
_RESERVATION: tuple[tuple[float, float], ...] = ((1, 0.06), (1, 0.01), (2, 0.005))
_RESERVATION_ABOVE = 0.0025


@dataclass(frozen=True)
class Packed:
    """A request after packing: vCPU and GiB (not yet snapped to Autopilot's grid), and the
    node rung it fills (None: left as asked)."""

    cpu: float
    memory_gib: float
    node_vcpu: int | None = None


def reserved_cpu(node_vcpu: float) -> float:
    """vCPU GKE reserves on a node of `node_vcpu`: 6 % of the first core, 1 % of the second,
    0.5 % of cores 3-4, 0.25 % of every core above 4."""
    reserved, left = 0.0, float(node_vcpu)
    for cores, share in _RESERVATION:
        reserved += min(left, cores) * share
        left = max(0.0, left - cores)
    return reserved + left * _RESERVATION_ABOVE


def allocatable_cpu(node_vcpu: float) -> float:
    """vCPU a node of `node_vcpu` can give its pods (before DaemonSets)."""
    return node_vcpu - reserved_cpu(node_vcpu)


def forced_node(cpu: float) -> int | None:
    """The smallest rung whose allocatable vCPU holds `cpu`, or None above every rung."""
    return next((size for size in NODE_SIZES if allocatable_cpu(size) >= cpu), None)


def fill_node(
    cpu: float, memory_gib: float, max_cpu: float | None = None, overhead: float = DAEMONSET_CPU
) -> Packed:
    """(cpu, memory_gib) grown to fill the rung the request already forces.

    The rung is chosen by allocatable CPU, which is exact; the grown CPU is that rung's
    allocatable minus `overhead`, floored to CPU_STEP and capped at `max_cpu` (the class's
    ceiling; None: none), so every node that fits the grown request also fitted the asked one
    and the shapes GKE may schedule on are unchanged. Memory grows by the same factor, so the
    GiB per process stays what the curve gave. Left as asked: a request above
    STANDARD_GIB_PER_CPU, above every rung or already above `max_cpu` (the ceiling check then
    names the operator's own value), and one the rung cannot grow (a small pod on a 1- or
    2-vCPU node, whose allocatable after DaemonSets is below the ask).
    """
    if cpu <= 0 or memory_gib > cpu * STANDARD_GIB_PER_CPU:
        return Packed(cpu, memory_gib)
    node = forced_node(cpu)
    if node is None:
        return Packed(cpu, memory_gib)
    usable = allocatable_cpu(node) - overhead
    if max_cpu is not None:
        usable = min(usable, max_cpu)
    # round() first: 30.75 / 0.25 in floats must floor to 123, not 122.
    grown = math.floor(round(usable / CPU_STEP, 6)) * CPU_STEP
    if grown <= cpu:
        return Packed(cpu, memory_gib)
    return Packed(grown, memory_gib * grown / cpu, node)
