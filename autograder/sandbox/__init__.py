"""The grading sandbox: bubblewrap + prlimit around each autograded notebook's kernel."""
