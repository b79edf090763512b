"""Zeus's batch-size optimizer server: a FastAPI app over a zeus-nb store.

A recurring job's runs may start on any machine; each run's in-training client
(:class:`zeus_nb.optimizer.batch_size.client.BatchSizeOptimizer` with an ``http://`` server
URL) asks this server for its batch size and reports how the run went. Run it with
``zeus-nb bso serve`` (or ``uvicorn zeus_nb.optimizer.batch_size.server.router:app``). The
routes, JSON bodies and status codes are Zeus's (:mod:`zeus_nb.optimizer.batch_size.common`):

* ``POST /jobs`` registers a job (201; 200 if registered with the same settings; 409 if with
  others; 422 for settings out of range), ``DELETE /jobs?job_id=`` deletes one (404: unknown);
* ``GET /jobs/batch_size?job_id=`` hands out the job's next trial (batch size, trial number);
* ``POST /report`` judges a run after an epoch (go on, or stop: converged or not) and records
  a stopped run; ``PATCH /trials`` ends a trial that will not report (its run crashed).

Modules: :mod:`.router` (the app), :mod:`.service` (what each route does), :mod:`.policy` (the
decision: zeus-nb's :class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer` over the
job's runs), :mod:`.jobs` (reading and writing one job in the database), :mod:`.database`
(tables and sessions), :mod:`.config` (``ZEUS_BSO_*`` settings), :mod:`.exceptions`.

The database is a zeus-nb store: the server writes the same ``jobs``, ``observations`` and
``trials`` tables as :class:`~zeus_nb.optimizer.batch_size.sql_store.SQLStore`, plus two
tables of its own (Zeus's job record, and the kind of each trial), so ``zeus-nb bso show
--store`` and :class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer` read a served
job's state directly. Importing :mod:`zeus_nb.optimizer.batch_size` never loads this package;
it needs the ``server`` extra (``pip install 'zeus-nb[server]'``).
"""
