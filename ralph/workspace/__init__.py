"""A lap's workspace: the checkout made with git at the last green commit, ralph's own git dir
beside it, the rules a lap's git runs by, the user's state it is provisioned with and never
writes back, and the safe tree a check reads."""
