# src/data
