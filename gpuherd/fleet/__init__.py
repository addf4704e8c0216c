"""The fleet view's engine: Prometheus's query API, the rows, and the source the view polls.

Headless; the one way into the Textual screen is `gpuherd.fleet.view`, which imports
`tui.fleet_app` only once Prometheus has answered.
"""
