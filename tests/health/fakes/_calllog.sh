# Sourced by every fake: record "<tool> <args>" so a test can see what the script ran.
[[ -n "${FAKE_CALL_LOG:-}" ]] && printf '%s %s\n' "${0##*/}" "$*" >> "$FAKE_CALL_LOG"
