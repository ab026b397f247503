# src/graph
