"""One thread owns the model; requests reach it through an asyncio queue.

Predictions waiting in the queue are gathered into one ``model.predict`` call (one encode): the first waits
``batch_wait_s`` for company when the last round had company (under concurrent load; a lone client's request
runs at once, so the window costs it nothing), then everything already queued joins, up to ``max_batch_texts`` texts (requests
with other options, e.g. ``reject``, get their own call in the same round). While a call runs, new requests
queue up and form the next batch, so batches grow with the load. Anything else that touches the model (adding
examples, persisting them, reading its labels) is an exclusive job: it runs alone, in queue order, so a
prediction sees either none or all of an update, and the predictions queued after an update see it.

A failed batched call is retried request by request, so one bad request fails alone. The queue's consumer
never dies on an error: each one goes back to the request that caused it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import logging
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)


class Stopped(RuntimeError):
  """The worker is shutting down; the request was not run."""


@dataclasses.dataclass
class _Job:
  future: asyncio.Future
  texts: Sequence[str] = ()  # a prediction
  options: tuple = ()  # its keyword arguments, sorted (requests with equal options share a call)
  call: Callable[[], Any] | None = None  # an exclusive job instead


class ModelWorker:
  """Runs ``model``'s calls on one thread: predictions batched, everything else exclusive (module docstring).
  ``stats`` counts requests, texts and model calls (``predict_calls`` < ``predict_requests`` when batching
  gathered requests)."""

  def __init__(self, model, *, max_batch_texts: int = 64, batch_wait_s: float = 0.002):
    if max_batch_texts < 1:
      raise ValueError(f"max_batch_texts must be >= 1, got {max_batch_texts}")
    if batch_wait_s < 0:
      raise ValueError(f"batch_wait_s must be >= 0, got {batch_wait_s}")
    self.model = model
    self.max_batch_texts, self.batch_wait_s = max_batch_texts, batch_wait_s
    self.stats = collections.Counter(predict_requests=0, predict_texts=0, predict_calls=0, largest_batch=0,
                                     exclusive_jobs=0)
    self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
    self._queue: asyncio.Queue[_Job] | None = None
    self._held: collections.deque[_Job] = collections.deque()  # taken from the queue, to run next (in order)
    self._running: list[_Job] = []  # the jobs taken from the queue in this round
    self._consumer: asyncio.Task | None = None
    self._had_company = False  # the last gathered round held more than one request

  # ------------------------------------------------------------------------------------------ lifetime

  async def start(self) -> None:
    self._queue = asyncio.Queue()
    self._consumer = asyncio.create_task(self._consume(), name="model-worker")

  async def stop(self) -> None:
    """Stops taking jobs: queued ones fail with ``Stopped``; a model call already running (a persist) finishes
    on its thread, but its requests are answered with ``Stopped`` too (uvicorn lets requests under way finish
    before it stops the app, so this happens only past its graceful-shutdown timeout)."""
    if self._consumer is not None:
      self._consumer.cancel()
      await asyncio.gather(self._consumer, return_exceptions=True)
    left = self._running + list(self._held)
    while self._queue is not None and not self._queue.empty():
      left.append(self._queue.get_nowait())
    for job in left:
      _fail(job.future, Stopped("the server is shutting down; the request may not have run"))
    await asyncio.to_thread(self._executor.shutdown, wait=True)

  @property
  def queued(self) -> int:
    return self._queue.qsize() if self._queue is not None else 0

  # ------------------------------------------------------------------------------------------ requests

  async def predict(self, texts: Sequence[str], **options) -> list:
    """``model.predict(texts, **options)``, batched with other requests."""
    return await self._submit(_Job(self._new_future(), texts=list(texts), options=tuple(sorted(options.items()))))

  async def exclusive(self, call: Callable[[], Any]) -> Any:
    """``call()`` on the model's thread, alone, after everything queued before it."""
    return await self._submit(_Job(self._new_future(), call=call))

  def _new_future(self) -> asyncio.Future:
    if self._queue is None or self._consumer is None or self._consumer.done():
      raise Stopped("the model worker is not running")
    return asyncio.get_running_loop().create_future()

  async def _submit(self, job: _Job) -> Any:
    self._queue.put_nowait(job)
    return await job.future

  # ------------------------------------------------------------------------------------------ consumer

  async def _consume(self) -> None:
    while True:
      job = self._held.popleft() if self._held else await self._queue.get()
      self._running = [job]  # answered with Stopped if the worker stops meanwhile
      try:
        if job.call is not None:
          await self._run_exclusive(job)
          continue
        batch, after = await self._gather(job)
        self._running = batch + ([after] if after is not None else [])
        await self._run_predictions(batch)
        if after is not None:
          await self._run_exclusive(after)
      except asyncio.CancelledError:
        raise
      except Exception:  # a bug here must not stop the server: log it and keep serving
        log.exception("model worker: unexpected error (the requests concerned were answered with it)")

  async def _gather(self, first: _Job) -> tuple[list[_Job], _Job | None]:
    """``first`` and the predictions queued behind it (after waiting ``batch_wait_s``), up to
    ``max_batch_texts`` texts or an exclusive job, which is returned to run after them."""
    if self.batch_wait_s > 0 and len(first.texts) < self.max_batch_texts and (
        self._had_company or not self._queue.empty() or self._held):
      await asyncio.sleep(self.batch_wait_s)
    batch, size = [first], len(first.texts)
    while size < self.max_batch_texts and (self._held or not self._queue.empty()):
      job = self._held.popleft() if self._held else self._queue.get_nowait()
      if job.call is not None:
        return batch, job
      if size + len(job.texts) > self.max_batch_texts:
        self._held.appendleft(job)  # first in the next round: this one is full
        break
      batch.append(job)
      size += len(job.texts)
    self._had_company = len(batch) > 1
    return batch, None

  async def _run_predictions(self, batch: list[_Job]) -> None:
    live = [job for job in batch if not job.future.done()]  # a client that went away cancelled its future
    groups: dict[tuple, list[_Job]] = {}
    for job in live:
      groups.setdefault(job.options, []).append(job)
    for options, jobs in groups.items():
      texts = [t for job in jobs for t in job.texts]
      self.stats.update(predict_requests=len(jobs), predict_texts=len(texts))
      try:
        predictions = await self._call(self.model.predict, texts, **dict(options))
      except Exception as e:
        if len(jobs) == 1:
          _fail(jobs[0].future, e)
          continue
        for job in jobs:  # find the request at fault: the others get their answers
          try:
            _succeed(job.future, await self._call(self.model.predict, job.texts, **dict(options)))
          except Exception as single:
            _fail(job.future, single)
        continue
      if len(predictions) != len(texts):
        error = RuntimeError(f"model.predict returned {len(predictions)} predictions for {len(texts)} texts")
        for job in jobs:
          _fail(job.future, error)
        continue
      self.stats["largest_batch"] = max(self.stats["largest_batch"], len(texts))
      start = 0
      for job in jobs:
        _succeed(job.future, predictions[start : start + len(job.texts)])
        start += len(job.texts)

  async def _run_exclusive(self, job: _Job) -> None:
    if job.future.done():
      return
    self.stats["exclusive_jobs"] += 1
    try:
      _succeed(job.future, await self._call(job.call))
    except Exception as e:
      _fail(job.future, e)

  async def _call(self, fn: Callable, *args, **kwargs) -> Any:
    """``fn`` on the model's thread. Counted as a model call when it is a prediction."""
    if fn == self.model.predict:
      self.stats["predict_calls"] += 1
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))


def _succeed(future: asyncio.Future, value: Any) -> None:
  if not future.done():
    future.set_result(value)


def _fail(future: asyncio.Future, error: BaseException) -> None:
  if not future.done():
    future.set_exception(error)
