"""The Prometheus exporter: a sink of the live (or replayed) sources, served over HTTP(S).

Headless (never imports Textual): `state` keeps what the sources said, `families` turns it into
metric families with bounded labels, `server` answers `GET /metrics` and nothing else, and
`exporter` ties them together for every command that takes `--serve-metrics`. The fleet view's
reading side (the Prometheus query API) lives in `gpuherd.fleet`.
"""
