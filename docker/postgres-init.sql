-- One Postgres for both servers: Prefect uses the `evosyn` database (POSTGRES_DB), MLflow this one
-- (the names `evosyn up --db postgresql://…/evosyn` uses: storage/postgres.py).
CREATE DATABASE evosyn_mlflow;
