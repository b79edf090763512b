"""Small helpers mirroring Zeus's ``zeus.utils`` (``zeus_nb.utils.env.get_env``)."""
