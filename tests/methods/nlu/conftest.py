"""Every test of the joint NLU method writes ``fit``'s training files under its own $FEWSHOT_NLU_CACHE."""

import pytest


@pytest.fixture(autouse=True)
def fit_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("FEWSHOT_NLU_CACHE", str(tmp_path / "cache"))
