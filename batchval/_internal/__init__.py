"""Everything behind batchval's public modules (`batchval`, `batchval.exceptions`,
`batchval.testing`, `batchval.airflow`): private, and free to change without notice.
Its rooms are folders named by what they do (docs/explanation/architecture.md draws
them): the foundations beside this file (`settings`, `logs`, `outcome`, `redaction`,
`postcodes`, `batching`), the command line (`cli`) and the Python API's workings
(`public`); the client (`api`), the input (`input`), the run's memory (`store`), the
engine in four rooms (`sending`, `money`, `place`, `runs`), the files' contract
(`contract`), the products (`valuations`, `streets`, `verify`), the commands around a run
(`reports`, `exports`, `admin`) and the sandbox (`sandbox`)."""
