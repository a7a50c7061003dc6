"""QAID pre-training (§2.2.1): self-supervised contrastive (Eq. 2) + 0.1 MLM on the train and valid utterances
of BANKING77, CLINC150, HWU64 and SNIPS (test sets excluded); batch 64 (x 2 views), 20 epochs, lr 1e-5.

  python -m fewshot_nlu.main --config=configs/qaid_pretrain.py --workdir=runs/qaid_pretrain
then fine-tune with --config.model.name=runs/qaid_pretrain/export. Cap a CPU run with --config.train.epochs (one
epoch at --config.train.learning_rate=5e-5: 45 min on 2 cores). Measured on all-MiniLM-L6-v2 (bench/results/qaid.md,
``pt`` rows): one epoch lowers the fine-tuned QAID in every cell tried (-0.2 to -4.1 points), so the shipped QAID
configs start from the packaged encoder, not from this stage.
"""

from fewshot_nlu.defaults import qaid_base


def get_config():
  config = qaid_base.add_qaid_fields(qaid_base.base_config())
  config.qaid.stage = "pretrain"
  config.qaid.mlm_weight = 0.1  # lambda
  config.qaid.class_weight = 0.0
  config.data.builder = "banking77"  # unused: the data are qaid.pretrain_datasets
  config.train.batch_size = 64
  config.train.epochs = 20
  config.train.save_every = 200
  return config
