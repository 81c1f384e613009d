"""The exit statuses every command shares, beside 0 and 1 (1: a check found something, `diff --exit-code`)."""

CONFIG_ERROR_EXIT = 2  # bad input: a config, an option, a path; the message says which and how to fix it
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
