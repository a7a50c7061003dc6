"""``serve.worker.ModelWorker`` on fake models (no JAX): which requests share a model call, the order of updates
and predictions, errors that stay with their request. The live server: serve/test_main."""

from __future__ import annotations

import asyncio
import threading

import pytest

from fewshot_nlu.serve.worker import ModelWorker, Stopped
from tests.serve.helpers import FakeModel


def run(coroutine):
  return asyncio.run(coroutine)


async def _started(model, **kwargs) -> ModelWorker:
  worker = ModelWorker(model, **kwargs)
  await worker.start()
  return worker


def test_queued_predictions_share_a_call_and_an_update_splits_them_in_order():
  async def scenario():
    model = FakeModel()
    worker = await _started(model, batch_wait_s=0.01)
    tasks = [asyncio.create_task(worker.predict(["a"])), asyncio.create_task(worker.predict(["b", "c"])),
             asyncio.create_task(worker.exclusive(model.bump)), asyncio.create_task(worker.predict(["d"])),
             asyncio.create_task(worker.predict(["e"], neighbours=1))]
    results = await asyncio.gather(*tasks)
    await worker.stop()
    return model, worker, results

  model, worker, results = run(scenario())
  assert results == [[("a", 0)], [("b", 0), ("c", 0)], 1, [("d", 1)], [("e", 1)]]
  assert model.calls == [(["a", "b", "c"], {}), (["d"], {}), (["e"], {"neighbours": 1})]  # other options: own call
  assert len(model.threads) == 1 and threading.get_ident() not in model.threads
  assert worker.stats["predict_requests"] == 4 and worker.stats["predict_calls"] == 3
  assert worker.stats["largest_batch"] == 3 and worker.stats["exclusive_jobs"] == 1


def test_a_full_batch_leaves_the_rest_for_the_next_call_without_passing_an_update():
  async def scenario():
    model = FakeModel()
    worker = await _started(model, max_batch_texts=2, batch_wait_s=0.01)
    tasks = [asyncio.create_task(worker.predict(["a"])), asyncio.create_task(worker.predict(["b", "c"])),
             asyncio.create_task(worker.exclusive(model.bump)), asyncio.create_task(worker.predict(["d"]))]
    results = await asyncio.gather(*tasks)
    await worker.stop()
    return model, results

  model, results = run(scenario())
  assert results == [[("a", 0)], [("b", 0), ("c", 0)], 1, [("d", 1)]]
  assert [texts for texts, _ in model.calls] == [["a"], ["b", "c"], ["d"]]


def test_a_failing_request_fails_alone_and_the_worker_goes_on():
  async def scenario():
    model = FakeModel()
    worker = await _started(model, batch_wait_s=0.01)
    tasks = [asyncio.create_task(worker.predict(["a"])), asyncio.create_task(worker.predict(["bad"])),
             asyncio.create_task(worker.predict(["b"])),
             asyncio.create_task(worker.exclusive(lambda: 1 / 0))]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    after = await worker.predict(["c"])
    await worker.stop()
    return model, results, after

  model, results, after = run(scenario())
  assert results[0] == [("a", 0)] and results[2] == [("b", 0)]
  assert isinstance(results[1], ValueError) and isinstance(results[3], ZeroDivisionError)
  assert model.calls[0][0] == ["a", "bad", "b"] and [c[0] for c in model.calls[1:4]] == [["a"], ["bad"], ["b"]]
  assert after == [("c", 0)]


def test_stopping_fails_what_is_queued_and_refuses_new_requests():
  async def scenario():
    model = FakeModel()
    worker = await _started(model, batch_wait_s=0.5)
    worker._had_company = True  # under load: the next request waits for company
    first = asyncio.create_task(worker.predict(["a"]))
    await asyncio.sleep(0.05)  # the consumer took it and waits for company
    queued = asyncio.create_task(worker.predict(["b"]))
    await asyncio.sleep(0)
    await worker.stop()
    with pytest.raises(Stopped):
      await worker.predict(["c"])
    return await asyncio.gather(first, queued, return_exceptions=True)

  first, queued = run(scenario())
  assert isinstance(first, Stopped) and isinstance(queued, Stopped)


def test_a_lone_request_does_not_wait_for_company_that_is_not_coming():
  """The batching window opens only under concurrent load (the last round gathered several requests): a lone
  client's request runs at once instead of waiting ``batch_wait_s``."""
  async def scenario():
    model = FakeModel()
    worker = await _started(model, batch_wait_s=5.0)
    start = asyncio.get_running_loop().time()
    await worker.predict(["a"])
    waited = asyncio.get_running_loop().time() - start
    await worker.stop()
    return waited

  assert run(scenario()) < 4.0


def test_bad_settings_are_refused():
  with pytest.raises(ValueError, match="max_batch_texts must be >= 1"):
    ModelWorker(FakeModel(), max_batch_texts=0)
  with pytest.raises(ValueError, match="batch_wait_s must be >= 0"):
    ModelWorker(FakeModel(), batch_wait_s=-1)
