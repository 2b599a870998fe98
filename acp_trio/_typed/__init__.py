"""The typed layer: method dispatch over schema classes, the Agent and Client
APIs with their peer proxies (generated from the method table), sessions,
early updates, and the tool-call and terminal handles."""
