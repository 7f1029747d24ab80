"""Running calls: the process-wide runtime, phone/text/development call runners, provider choice."""
