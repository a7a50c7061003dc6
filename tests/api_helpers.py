"""Toy examples shared by test_api and data/test_user_examples: 4 intents x 3 utterances of the tiny corpus."""

from tests import tiny

C = tiny.CORPUS
TEXTS = C  # 4 intents x 3 utterances
LABELS = ["bank"] * 3 + ["music"] * 3 + ["misc"] * 3 + ["chat"] * 3
