"""The server's tables (a zeus-nb store and its own two) and its database sessions."""
