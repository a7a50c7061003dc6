"""Device mesh, partition rules and global batches.

The mesh has three named axes:
  ``data``   pure data parallelism (params replicated along it);
  ``fsdp``   data parallelism whose params/optimizer state are sharded along it (ZeRO-3 style);
  ``model``  tensor parallelism (attention heads / MLP columns).
Batches are split over ``("data", "fsdp")`` jointly. Losses are written on the global batch; under ``jax.jit``
with these shardings XLA inserts the all-gathers (e.g. in-batch negatives from every device).

Parameter placement is decided by regex rules on the parameter path (``layer_0/attention/query/kernel``),
first match wins, in the spirit of big_vision:
  ``("embeddings/.*", "replicate")``  keep on every device;
  ``(".*", "logical")``               map the param's logical axis names through ``logical_axis_rules``.
A mesh axis of size 1 and a dimension not divisible by its mesh axis both fall back to replication of that
dimension, so one rule set serves a laptop CPU and a pod.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Sequence

import flax
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

log = logging.getLogger(__name__)

MESH_AXES = ("data", "fsdp", "model")
BATCH_AXES = ("data", "fsdp")
# logical name -> mesh axis. "embed" -> fsdp shards every matrix along the model dimension (FSDP);
# "mlp"/"joined_kv"/"vocab" -> model gives Megatron-style tensor parallelism when model > 1.
DEFAULT_LOGICAL_AXIS_RULES = (
    ("embed", "fsdp"),
    ("mlp", "model"),
    ("joined_kv", "model"),
    ("vocab", "model"),
    ("positions", None),
    ("token_types", None),
)
DEFAULT_PARAM_RULES = ((".*", "logical"),)


def initialize_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None) -> None:
  """Multi-host set-up (``jax.distributed.initialize``). On Cloud TPU all arguments may be None and are
  discovered from the environment. Call before any other JAX call; later calls do nothing. CPU processes use
  gloo collectives."""
  if jax.distributed.is_initialized():  # a second run in the same process (tests, notebooks)
    return
  if jax.config.jax_cpu_collectives_implementation is None:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes (tests); TPUs ignore it
  jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                             process_id=process_id)


def make_mesh(shape: dict[str, int] | None = None, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A mesh with axes ``data, fsdp, model``; one size may be -1 (all remaining devices). Explicit sizes that
  need fewer devices than available use the first ones (with a warning).

  ``make_mesh({'data': -1})`` is plain data parallelism over every device.
  """
  devices = list(devices if devices is not None else jax.devices())
  shape = dict(shape or {"data": -1})
  unknown = set(shape) - set(MESH_AXES)
  if unknown:
    raise ValueError(f"mesh axes {sorted(unknown)} unknown; use {MESH_AXES}")
  sizes = [int(shape.get(a, 1)) for a in MESH_AXES]
  if sizes.count(-1) > 1:
    raise ValueError(f"mesh {shape}: at most one axis may be -1")
  known = int(np.prod([s for s in sizes if s != -1]))
  if -1 in sizes:
    if len(devices) % known:
      raise ValueError(f"mesh {shape}: {len(devices)} devices are not divisible by {known}")
    sizes[sizes.index(-1)] = len(devices) // known
  needed = int(np.prod(sizes))
  if needed > len(devices):
    raise ValueError(f"mesh {dict(zip(MESH_AXES, sizes))} needs {needed} devices, "
                     f"{len(devices)} available")
  if needed < len(devices):
    log.warning("mesh %s uses %d of %d devices", dict(zip(MESH_AXES, sizes)), needed, len(devices))
  return Mesh(np.asarray(devices[:needed]).reshape(sizes), MESH_AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) dimension split over the data-parallel axes, the rest replicated."""
  return NamedSharding(mesh, P(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def data_parallel_size(mesh: Mesh) -> int:
  return int(np.prod([mesh.shape[a] for a in BATCH_AXES]))


def _spec_for(shape: tuple[int, ...], logical: P, mesh: Mesh, logical_rules: dict[str, Any]) -> P:
  axes = []
  for dim, name in zip(shape, tuple(logical) + (None,) * (len(shape) - len(logical))):
    mesh_axis = logical_rules.get(name) if name is not None else None
    if mesh_axis is None or mesh.shape.get(mesh_axis, 1) == 1 or dim % mesh.shape[mesh_axis]:
      axes.append(None)
    else:
      axes.append(mesh_axis)
  # A mesh axis may appear only once per spec (e.g. vocab and embed both mapped to one axis).
  seen = set()
  for i, a in enumerate(axes):
    if a is not None and a in seen:
      axes[i] = None
    seen.add(a)
  return P(*axes)


def param_specs(params: Any, logical_axes: Any, mesh: Mesh,
                rules: Sequence[tuple[str, str]] = DEFAULT_PARAM_RULES,
                logical_axis_rules: Sequence[tuple[str, str | None]] = DEFAULT_LOGICAL_AXIS_RULES) -> Any:
  """A ``PartitionSpec`` per parameter, from the regex ``rules`` (first match wins).

  ``params`` may hold arrays or ``ShapeDtypeStruct``s; ``logical_axes`` is the matching tree of logical
  ``PartitionSpec``s (``transformer.logical_axes``); params without one (e.g. a head) are replicated unless
  a rule says otherwise.
  """
  compiled = [(re.compile(pattern), strategy) for pattern, strategy in rules]
  for _, strategy in compiled:
    if strategy not in ("replicate", "logical"):
      raise ValueError(f"sharding strategy {strategy!r} unknown; use 'replicate' or 'logical'")
  logical_rules = dict(logical_axis_rules)
  flat_params = flax.traverse_util.flatten_dict(params, sep="/")
  flat_logical = flax.traverse_util.flatten_dict(logical_axes, sep="/") if logical_axes else {}
  specs = {}
  for path, leaf in flat_params.items():
    strategy = next((s for pattern, s in compiled if pattern.fullmatch(path)), "replicate")
    logical = flat_logical.get(path)
    if strategy == "replicate" or logical is None:
      specs[path] = P()
    else:
      specs[path] = _spec_for(tuple(leaf.shape), logical, mesh, logical_rules)
  return flax.traverse_util.unflatten_dict(specs, sep="/")


def shardings_from_specs(specs: Any, mesh: Mesh) -> Any:
  return jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda x: isinstance(x, P))


def global_batch(batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """The whole global batch (host numpy arrays) as one global array per field, split over ``("data", "fsdp")``.

  The one rule for data on several processes: every process builds the *same whole* global batch (the same
  stream, plan and seed as a single-process run, so the batch sequence is that run's and a resumed run continues
  it exactly), and each places only the rows of its own devices on them (``make_array_from_callback``). Host
  work per step is numpy padding of token ids, negligible beside the step; the rows every process pads alike
  (same length bucket, same packing), which per-process batches could not guarantee.
  """
  sharding = batch_sharding(mesh)
  out = {}
  for name, value in batch.items():
    value = np.asarray(value)
    if value.shape[0] % data_parallel_size(mesh):
      raise ValueError(f"batch field {name!r}: global batch {value.shape[0]} is not divisible by the "
                       f"{data_parallel_size(mesh)} data-parallel devices")
    out[name] = jax.make_array_from_callback(value.shape, sharding, lambda index, value=value: value[index])
  return out


def to_host(tree: Any) -> Any:
  """Global arrays -> numpy on this host, whole: ``jax.device_get`` on one process; on several, arrays sharded
  over other processes' devices (FSDP params) are gathered first (``process_allgather``, a collective every
  process must call)."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  from jax.experimental import multihost_utils
  return multihost_utils.process_allgather(tree, tiled=True)


def place(tree: Any, shardings: Any) -> Any:
  """Host arrays (identical on every process) -> global arrays with ``shardings``; each device receives
  only its shard, so this also works multi-host and for params larger than one device."""
  def put(x, s):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, s, lambda index: x[index])
  return jax.tree.map(put, tree, shardings)


def log_param_shardings(specs: Any) -> None:
  for path, spec in flax.traverse_util.flatten_dict(specs, sep="/").items():
    if any(axis is not None for axis in spec):
      log.info("sharded %s as %s", path, spec)
