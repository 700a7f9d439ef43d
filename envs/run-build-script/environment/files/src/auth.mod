v1.2 authentication
