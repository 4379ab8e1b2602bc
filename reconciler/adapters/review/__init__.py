"""The review-host adapters: GitHub and GitLab REST (PR comments, commit statuses)."""
