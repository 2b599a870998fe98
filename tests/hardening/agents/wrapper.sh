# An npx-style wrapper: runs the agent as a child (no exec) and waits for it.
# Usage: sh wrapper.sh AGENT_CMD...
"$@"
status=$?
exit $status
