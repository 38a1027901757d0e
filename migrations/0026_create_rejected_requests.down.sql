DROP TABLE IF EXISTS rejected_requests;
