"""Process tools: the supervisor that runs a recorded command independently of gpuherd."""
