"""Training: Trainer, Estimators (+ agent backends), Criteria + Loss, Optimizers."""
