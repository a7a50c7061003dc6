"""The public slot corpora readers (``data.slot_corpora``) on hand-made files in the shipped layouts."""

import json

import pytest

from fewshot_nlu.data import slot_corpora
from fewshot_nlu.errors import MissingDataFile


def test_nlupp_folds_are_the_domain_s_shipped_folds_in_order_with_nested_slots_resolved(tmp_path):
  domain = tmp_path / "NLUPP" / "data" / "hotels"
  domain.mkdir(parents=True)
  for k in (0, 1, 2, 10):  # numeric order, not text order (fold10 after fold2)
    rows = [{"text": f"book fold {k} from May", "intents": ["make", "booking"],
             "slots": {"date_period": {"text": "from May", "span": [11 + len(str(k)), 19 + len(str(k))]},
                       "date_from": {"text": "May", "span": [16 + len(str(k)), 19 + len(str(k))]}}},
            {"text": "hi there"}]
    (domain / f"fold{k}.json").write_text(json.dumps(rows))
  folds = slot_corpora.nlupp_folds(tmp_path, "hotels")
  assert [f[0].text for f in folds] == ["book fold 0 from May", "book fold 1 from May", "book fold 2 from May",
                                        "book fold 10 from May"]
  first = folds[0][0]
  assert [(first.text[x.start:x.end], x.label) for x in first.entities] == [("from May", "hotels_date_period")]
  assert folds[0][1].entities == () and folds[0][1].intent is None
  assert len(list(slot_corpora.examples("nlupp", tmp_path))) == 8  # the whole corpus reads the same files
  with pytest.raises(MissingDataFile, match="no NLU.. folds"):
    slot_corpora.nlupp_folds(tmp_path, "banking")
