"""Few-shot NLU for task-oriented dialogue in JAX/Flax.

From Python: ``fewshot_nlu.fit(texts, labels, method="convfit")`` trains and returns a model,
``fewshot_nlu.load(folder)`` reads an exported one (``fewshot_nlu.api``). Both are imported on first use, so
``import fewshot_nlu`` itself loads neither JAX nor TensorFlow Datasets.
"""

__all__ = ["fit", "load"]


def __getattr__(name: str):
  if name in __all__:
    from fewshot_nlu import api
    return getattr(api, name)
  raise AttributeError(f"module 'fewshot_nlu' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted([*globals(), *__all__])
