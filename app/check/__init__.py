"""The schedule checker: explores every interleaving of a small pipeline configuration and answers
`safe` or the shortest schedule that reaches each diagnostic kind (docs/checker.md). `engine` is
the search, `model` the reductions' view of the engine state, `service` the request-to-answer path
the API (app/api/routes/check.py) and the CLI (`cli`) share."""
