"""One process of a real multi-process JAX run on CPU, for tests/test_multiprocess.py (not a test module).

  python -m tests.multiprocess_worker SPEC.json PROCESS_ID

SPEC (written by the test): ``processes`` (1, 2 or 4: the run has 4 CPU devices in all, 4 / processes per
process), ``port`` (the coordinator's, on localhost), ``runs`` (the folder of work directories), ``tag`` (this
run's name), ``methods`` ({name: {"make": config maker in ``CONFIGS``, "args": its arguments}}) and
``interrupt_at`` ({name: step}: that method's run is interrupted at that step, as Ctrl-C would, then rerun with
the same command, which resumes it).

Each method's run goes through ``fewshot_nlu.main.run`` with ``config.distributed`` set (several processes),
into ``<runs>/<tag>/<method>`` (shared by the processes, as a pod's ``gs://`` workdir is). Every global batch the
loop puts on the mesh is recorded as a digest of the host arrays, per process, in ``<runs>/<tag>/<method>.
batches-p<ID>.json``: the test checks that every process built the same global batches as the single-process
run.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import sys


def _batch_digest(batch: dict) -> str:
  import numpy as np
  digest = hashlib.sha1()
  for name in sorted(batch):
    value = np.ascontiguousarray(batch[name])
    digest.update(f"{name}:{value.dtype}:{value.shape}".encode())
    digest.update(value.tobytes())
  return digest.hexdigest()[:16]


def main(spec_path: str, process_id: int) -> None:
  spec = json.loads(pathlib.Path(spec_path).read_text())
  processes = spec["processes"]
  from fewshot_nlu import main as entry, sharding
  from fewshot_nlu.train import loop
  from tests import multiprocess_configs
  # after the imports (tests.conftest asks for 8 devices): JAX reads these when its backend starts, at first use
  os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={4 // processes}"
  os.environ["JAX_PLATFORMS"] = "cpu"

  real_global_batch = sharding.global_batch
  for name, method in spec["methods"].items():
    config = getattr(multiprocess_configs, method["make"])(*method["args"])
    config.mesh.data, config.mesh.fsdp, config.mesh.model = -1, config.mesh.get("fsdp", 1), 1
    config.data.tfds_dir = str(pathlib.Path(spec["runs"]) / f"tfds-{spec['tag']}-p{process_id}")
    if processes > 1:
      config.distributed.enabled = True
      config.distributed.coordinator_address = f"localhost:{spec['port']}"
      config.distributed.num_processes = processes
      config.distributed.process_id = process_id
    workdir = pathlib.Path(spec["runs"]) / spec["tag"] / name
    digests, interrupt_at = [], spec.get("interrupt_at", {}).get(name)

    def recording_global_batch(batch, mesh):
      if interrupt_at is not None and len(digests) == interrupt_at and not interrupted:
        raise KeyboardInterrupt(f"test interrupt before step {interrupt_at + 1}")
      digests.append(_batch_digest(batch))
      return real_global_batch(batch, mesh)

    loop.sharding.global_batch = recording_global_batch
    interrupted = False
    try:
      entry.run(config, workdir)
    except KeyboardInterrupt:
      interrupted = True
      entry.run(config, workdir)  # the same command again: resumes
    finally:
      loop.sharding.global_batch = real_global_batch
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir.parent / f"{name}.batches-p{process_id}.json").write_text(json.dumps(digests) + "\n")
    print(f"process {process_id}: {name} done ({len(digests)} batches)", flush=True)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]))
