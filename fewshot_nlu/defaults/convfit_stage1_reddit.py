"""ConvFiT Stage 1 at pod scale: response ranking (MNEG, Eq. 1) on Reddit, global batch 4096 over a TPU mesh.

On a Cloud TPU pod slice (see launch/README.md), every worker runs:
  python -m fewshot_nlu.main --config=configs/convfit_stage1_reddit.py \
      --workdir=gs://BUCKET/runs/stage1_reddit --config.distributed.enabled=True
(``launch/run.sh`` does this on all workers at once; ``launch/setup_workers.sh --data gs://BUCKET/data``
copies the raw files to each worker's ~/data, i.e. $FEWSHOT_NLU_DATA, so Reddit is read from
$FEWSHOT_NLU_DATA/Reddit.) Resuming after a preemption is the same command (orbax
checkpoint + data-stream position in the workdir).

What makes it pod-shaped (all on the same code path as configs/convfit_stage1.py):
  * data: PolyAI conversational-datasets Reddit JSON lines (``train-*.json`` / ``test-*.json`` under
    ``data.raw_dir``); every process streams the same global batches (the single-process sequence) and places
    its own devices' rows (``sharding.global_batch``);
  * global batch 4096 (paper §3: 256): the [4096, 4096] MNEG score matrix spans every device's responses, i.e.
    4095 in-batch negatives per context, all-gathered by XLA inside the jitted step;
  * ``loss.cache_chunks``: 0 (plain MNEG) fits MiniLM at 256 rows per chip in bf16; set 4-16 (gradient
    caching) for BERT-base / longer inputs or batches of tens of thousands;
  * bf16 compute (params and optimizer state stay float32);
  * mesh ``data x fsdp`` = (-1, 4): params and Adam moments sharded 4 ways along the model dimension (FSDP,
    within a host's 4 chips on v4), data parallel across hosts. ``--config.mesh.fsdp=1`` on a single device;
  * async orbax checkpoints every 500 steps (the step is not blocked by the write), 3 kept; the data-stream
    position (epoch, batch) is saved beside them, so a resumed run sees exactly the remaining batches.

Deviations from the paper (§3): batch 4096 instead of 256 (more negatives per step, 16x fewer steps per epoch;
the learning rate stays at 2e-5); 1 epoch over whatever share of Reddit is in ``data.raw_dir`` (the paper:
2 epochs over ~2% of Reddit). The 8-fake-device CPU test (tests/methods/convfit/test_stage1.py) runs this config with
a tiny model and batch 16 and resumes it.
"""

from fewshot_nlu.defaults import convfit_stage1


def get_config():
  config = convfit_stage1.get_config()
  config.data.builder = "reddit_conversational"
  config.data.builder_config = "default"
  config.data.raw_dir = ""  # a local folder of train-*.json / test-*.json (else $FEWSHOT_NLU_DATA/Reddit)
  config.data.train_split = "train"
  config.data.eval_split = "test"  # response selection R@1 of 100 on held-out pairs (eval.max_pairs of them)
  config.model.dtype = "bfloat16"
  config.model.max_length = 64
  config.train.batch_size = 4096
  config.train.epochs = 1
  config.train.learning_rate = 2e-5
  config.train.save_every = 500
  config.train.keep_checkpoints = 3
  config.train.log_every = 50
  config.loss.cache_chunks = 0
  config.eval.max_pairs = 10000
  config.eval.batch_size = 512
  config.eval.before_training = False
  config.mesh.data = -1
  config.mesh.fsdp = 4
  config.mesh.model = 1
  return config
