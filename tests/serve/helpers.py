"""``FakeModel``: a model without JAX for the server's parts (serve/test_worker, serve/test_app)."""

import threading


class FakeModel:
  """``predict`` answers (text, version); ``bump`` is an update; every call is recorded with its thread."""

  def __init__(self):
    self.version, self.calls, self.threads = 0, [], set()

  def predict(self, texts, **options):
    self.threads.add(threading.get_ident())
    self.calls.append((list(texts), options))
    if "bad" in texts:
      raise ValueError("bad text")
    return [(t, self.version) for t in texts]

  def bump(self):
    self.threads.add(threading.get_ident())
    self.version += 1
    return self.version
