v0.9 invoices and payments
