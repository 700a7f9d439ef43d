v2.0 full-text search
