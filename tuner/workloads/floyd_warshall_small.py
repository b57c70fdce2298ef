"""The Floyd-Warshall pipeline on a reduced space (spaces/floyd-warshall-small.yaml), small enough to
brute-force: the complete recording that `tuner compare-strategies` replays. Graphs, reference and program
are those of the floyd-warshall workload."""

from tuner.workloads.floyd_warshall import FloydWarshall


class FloydWarshallSmall(FloydWarshall):
    name = "floyd-warshall-small"
    run_help = "all-pairs shortest paths (the floyd-warshall program, configs from the reduced space)"
    shares_program_with = ("floyd-warshall",)


WORKLOAD = FloydWarshallSmall()
