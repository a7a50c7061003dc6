"""An HTTP server for any exported model, with live intent updates:

  python -m fewshot_nlu.serve --model runs/convfit_banking77/export [--host 127.0.0.1 --port 8000]

  POST /predict   {"texts": [...], "neighbours": 3?, "reject": false?}
                  -> {"predictions": [{"text", "labels", "score", + the evidence of the model's kind}]}
  POST /examples  {"texts": [...], "labels": [...]}   (?persist=true also writes them into the export)
                  -> {"added", "new_labels", "labels", "examples", "persisted"}
  GET  /labels    -> {"kind", "labels", "examples"}
  GET  /healthz   -> {"status": "ok", "kind", "model", "stats"}

Modules: ``bodies`` (request bodies read and checked: every bad input is a 4xx JSON error naming the field),
``worker`` (one thread owns the model; concurrent predictions are gathered into one model call, and changes
to the model are serialised with them), ``app`` (the Starlette routes), ``__main__`` (the command line, on
uvicorn). Needs the ``serve`` extra: ``pip install 'fewshot_nlu[serve]'``.
"""
