// Package launch reads where this process sits in a pipeline from the
// environment a launcher gives it: torchrun's RANK, WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT, or a Kubernetes JobSet's Indexed Job
// (JOB_COMPLETION_INDEX, and the names that make up the pods' DNS names
// <jobset>-<job>-<jobIndex>-<podIndex>.<subdomain>). Rank i, or pod index
// i, is stage i; the stages' addresses follow from the environment where
// it determines them.
package launch
